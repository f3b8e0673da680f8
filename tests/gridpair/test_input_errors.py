"""Every bad input of grid_pair raises a TypeError/ValueError naming the argument and what was
expected; nothing is coerced."""

import re

import pytest
import torch

from gridpair import grid_pair, reference_grid_pair

N, D, F, K, C, G = 2, 4, 2, 3, 5, 7


def good():
    return dict(
        left=torch.randn(N, D, F, K * C),
        right=torch.randn(N, D, F, K * C),
        to_grid=torch.randn(G, D * K),
        from_grid=torch.randn(G, D * K),
        n_frames=K,
    )


CASES = [
    # (replacement, error type, pattern the message must match)
    ({"left": [[1.0]]}, TypeError, r"left: expected a torch\.Tensor, got list"),
    ({"from_grid": 3.0}, TypeError, r"from_grid: expected a torch\.Tensor, got float"),
    ({"n_frames": 3.0}, TypeError, r"n_frames: expected an int, got float"),
    ({"n_frames": True}, TypeError, r"n_frames: expected an int, got bool"),
    ({"n_frames": 0}, ValueError, r"n_frames: expected n_frames >= 1, got 0"),
    ({"n_frames": -3}, ValueError, r"n_frames: expected n_frames >= 1, got -3"),
    ({"left": torch.randn(N, D, K * C), "right": torch.randn(N, D, K * C)}, ValueError,
     r"left: expected a 4-d tensor \(N, D, F, K\*C\), got shape \(2, 4, 15\)"),
    ({"right": torch.randn(N + 1, D, F, K * C)}, ValueError,
     r"right: expected the shape of left \(2, 4, 2, 15\), got \(3, 4, 2, 15\)"),
    ({"n_frames": 4}, ValueError,
     r"n_frames: expected a divisor of the last axis of left \(15 = K\*C\), got 4"),
    ({"to_grid": torch.randn(G, D * K, 1)}, ValueError,
     r"to_grid: expected a 2-d tensor \(G, D\*K\), got shape \(7, 12, 1\)"),
    ({"to_grid": torch.randn(G, D * K + 1), "from_grid": torch.randn(G, D * K + 1)}, ValueError,
     r"to_grid: expected width D\*K = 12 \(D = 4 from left, K = 3\), got shape \(7, 13\)"),
    ({"from_grid": torch.randn(G + 1, D * K)}, ValueError,
     r"from_grid: expected the shape of to_grid \(7, 12\), got \(8, 12\)"),
    ({"left": torch.ones(N, D, F, K * C, dtype=torch.int64)}, TypeError,
     r"left: expected a floating-point dtype, got torch\.int64"),
    ({"right": torch.randn(N, D, F, K * C, dtype=torch.float64)}, TypeError,
     r"right: expected dtype torch\.float32 \(the dtype of left\), got torch\.float64"),
    ({"to_grid": torch.randn(G, D * K, dtype=torch.bfloat16)}, TypeError,
     r"to_grid: expected dtype torch\.float32 \(the dtype of left\), got torch\.bfloat16"),
    ({"from_grid": torch.randn(G, D * K, device="meta")}, ValueError,
     r"from_grid: expected device cpu \(the device of left\), got meta"),
]


@pytest.mark.parametrize("function", [grid_pair, reference_grid_pair])
@pytest.mark.parametrize(("change", "error", "pattern"), CASES,
                         ids=[re.sub(r"\W+", "_", c[2])[:48] for c in CASES])
def test_bad_input_names_argument_and_expectation(function, change, error, pattern):
    args = good() | change
    with pytest.raises(error, match=pattern):
        function(**args)


def test_projector_needing_gradient_is_refused_by_the_fused_operator():
    args = good()
    args["to_grid"].requires_grad_()
    with pytest.raises(ValueError, match=r"to_grid: expected a constant projector"):
        grid_pair(**args)
    # The reference composition differentiates projectors like any einsum.
    reference_grid_pair(**args).sum().backward()
    assert args["to_grid"].grad is not None


def test_good_input_passes_unchanged():
    args = good()
    out = grid_pair(**args)
    assert out.shape == args["left"].shape and out.dtype == torch.float32


@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_custom_ops_refuse_mixed_dtypes(op):
    x = torch.randn(N, D, F, K * C)
    proj = torch.randn(G, D * K)
    n_operands = {"grid_pair_fwd": 2, "grid_pair_bwd": 3, "grid_pair_bwd2": 5}[op]
    operands = [x] * (n_operands - 1) + [x.double()]
    with pytest.raises(TypeError, match=rf"gridpair::{op}: argument {n_operands - 1} has "
                                        r"torch\.float64"):
        getattr(torch.ops.gridpair, op)(*operands, proj, proj, K)
