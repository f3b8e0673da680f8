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


OP_OPERANDS = {  # the operands of each public op, in schema order
    "fwd": ("left", "right"),
    "bwd": ("grad_out", "left", "right"),
    "bwd2": ("grad_out", "left", "right", "grad_grad_left", "grad_grad_right"),
}


def _op_call(op, change):
    """Good arguments of torch.ops.gridpair.grid_pair_<op> by name, with ``change`` applied."""
    args = {name: torch.randn(N, D, F, K * C) for name in OP_OPERANDS[op]}
    args |= {"to_grid": torch.randn(G, D * K), "from_grid": torch.randn(G, D * K),
             "n_frames": K}
    args |= {name: value(op) if callable(value) else value for name, value in change.items()
             if name in args}
    return getattr(torch.ops.gridpair, f"grid_pair_{op}"), args


def _last(op):
    return OP_OPERANDS[op][-1]


OP_CASES = [
    # (arguments to replace, error type, message after "gridpair::grid_pair_<op>: ")
    ({"to_grid": torch.randn(G, D * K - 1), "from_grid": torch.randn(G, D * K - 1)},
     ValueError, r"to_grid: expected width D\*K = 12 \(D = 4 from {first}, K = 3\), "
                 r"got shape \(7, 11\)"),
    ({"from_grid": torch.randn(G - 2, D * K)}, ValueError,
     r"from_grid: expected the shape of to_grid \(7, 12\), got \(5, 12\)"),
    ({"to_grid": torch.randn(G, D, K), "from_grid": torch.randn(G, D, K)}, ValueError,
     r"to_grid: expected a 2-d tensor \(G, D\*K\), got shape \(7, 4, 3\)"),
    ({name: torch.randn(N, D, K * C) for name in ("left", "right", "grad_out",
                                                   "grad_grad_left", "grad_grad_right")},
     ValueError, r"{first}: expected a 4-d tensor \(N, D, F, K\*C\), got shape \(2, 4, 15\)"),
    ({"right": torch.randn(N, D + 1, F, K * C)}, ValueError,
     r"right: expected the shape of {first} \(2, 4, 2, 15\), got \(2, 5, 2, 15\)"),
    ({"n_frames": 4}, ValueError,
     r"n_frames: expected a divisor of the last axis of {first} \(15 = K\*C\), got 4"),
    ({"n_frames": 0}, ValueError, r"n_frames: expected n_frames >= 1, got 0"),
    ({"right": torch.randn(N, D, F, K * C, dtype=torch.float64)}, TypeError,
     r"right: expected dtype torch\.float32 \(the dtype of {first}\), got torch\.float64"),
    ({"from_grid": torch.randn(G, D * K, device="meta")}, ValueError,
     r"from_grid: expected device cpu \(the device of {first}\), got meta"),
]


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
@pytest.mark.parametrize(("change", "error", "pattern"), OP_CASES,
                         ids=[re.sub(r"\W+", "_", c[2])[:40] for c in OP_CASES])
def test_custom_ops_check_what_grid_pair_checks(op, change, error, pattern):
    function, args = _op_call(op, change)
    message = rf"gridpair::grid_pair_{op}: " + pattern.format(first=OP_OPERANDS[op][0])
    with pytest.raises(error, match=message):
        function(*args.values())


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
def test_custom_ops_name_the_operand_with_another_dtype(op):
    function, args = _op_call(op, {})
    args[_last(op)] = args[_last(op)].double()
    with pytest.raises(TypeError, match=rf"gridpair::grid_pair_{op}: {_last(op)}: expected "
                                        rf"dtype torch\.float32 \(the dtype of "
                                        rf"{OP_OPERANDS[op][0]}\), got torch\.float64"):
        function(*args.values())


MIXED_CASES = [
    # (compute_dtype, tensors to convert {name: dtype}, error type, message after the op's name)
    (torch.bfloat16, {}, TypeError,
     r"to_grid: expected dtype torch\.bfloat16 \(the compute_dtype\), got torch\.float32"),
    (torch.bfloat16, {"to_grid": torch.bfloat16, "from_grid": torch.float16}, TypeError,
     r"from_grid: expected dtype torch\.bfloat16 \(the compute_dtype\), got torch\.float16"),
    (torch.bfloat16, {"to_grid": torch.bfloat16, "from_grid": torch.bfloat16,
                      "right": torch.float16}, TypeError,
     r"right: expected dtype torch\.bfloat16 \(the compute_dtype\) or torch\.float32, "
     r"got torch\.float16"),
    (torch.bfloat16, {"to_grid": torch.bfloat16, "from_grid": torch.bfloat16,
                      "right": torch.float64}, TypeError,
     r"right: expected dtype torch\.bfloat16 \(the compute_dtype\) or torch\.float32, "
     r"got torch\.float64"),
    (torch.int32, {}, TypeError,
     r"compute_dtype: expected a floating-point torch\.dtype or None, got torch\.int32"),
]


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
@pytest.mark.parametrize(("compute_dtype", "dtypes", "error", "pattern"), MIXED_CASES,
                         ids=[re.sub(r"\W+", "_", c[3])[:40] for c in MIXED_CASES])
def test_mixed_precision_form_names_what_does_not_fit(op, compute_dtype, dtypes, error,
                                                      pattern):
    """With compute_dtype the projectors must come in it and every operand in it or in
    float32: nothing else is rounded silently."""
    function, args = _op_call(op, {})
    for name, dtype in dtypes.items():
        args[name] = args[name].to(dtype)
    with pytest.raises(error, match=rf"gridpair::grid_pair_{op}: {pattern}"):
        function(*args.values(), compute_dtype)


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
@pytest.mark.parametrize("projector", ["to_grid", "from_grid"])
def test_custom_ops_refuse_a_projector_needing_gradient(op, projector):
    """As grid_pair does: the ops compute no projector gradient, so a trainable projector
    would otherwise stay silently without one while its operands get theirs."""
    function, args = _op_call(op, {})
    args[OP_OPERANDS[op][0]].requires_grad_()
    args[projector].requires_grad_()
    with pytest.raises(ValueError, match=rf"gridpair::grid_pair_{op}: {projector}: expected a "
                                         r"constant projector \(requires_grad=False\)"):
        function(*args.values())
