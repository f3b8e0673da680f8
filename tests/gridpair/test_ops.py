"""The custom-op chain torch.ops.gridpair.* on the CPU: conformance (opcheck), derivatives to
second order against float64 autograd of the reference, fake tensors, odd and strided shapes."""

import dataclasses

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import gridpair
from gridpair import grid_pair, reference_grid_pair
from gridpair.active import using_selector
from gridpair.selector import LaunchSelector
from numerics import (
    assert_within_reference_error,
    draw,
    force_quantities,
    reference_quantities,
)

SHAPES = [  # (nodes, degrees, focus, frames, channels, grid)
    (3, 9, 2, 3, 4, 23),
    (2, 49, 1, 3, 3, 37),
    (4, 16, 2, 1, 7, 19),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "N{}-D{}-F{}-K{}-C{}-G{}".format(*s))
@pytest.mark.parametrize("layout", ["contiguous", "degree_major"])
def test_forward_first_and_second_order_against_float64(shape, layout):
    ops = draw(*shape, seed=11, layout=layout)
    reference32, exact = reference_quantities(ops, torch.float32)
    fused = force_quantities(grid_pair, ops.to(torch.float32))
    assert_within_reference_error(fused, reference32, exact, factor=5.0)


def test_float64_operands_are_exact_to_rounding():
    ops = draw(2, 9, 2, 3, 4, 23, seed=3)
    got = force_quantities(grid_pair, ops)
    want = force_quantities(reference_grid_pair, ops)
    for name in got:
        torch.testing.assert_close(got[name], want[name], rtol=1e-12, atol=1e-12)


def test_gradcheck_and_gradgradcheck_through_the_ops():
    ops = draw(2, 4, 2, 2, 3, 5, seed=4)
    left = ops.left.requires_grad_()
    right = ops.right.requires_grad_()

    def fn(a, b):
        return grid_pair(a, b, ops.to_grid, ops.from_grid, 2)

    assert torch.autograd.gradcheck(fn, (left, right))
    assert torch.autograd.gradgradcheck(fn, (left, right))


def test_third_order_goes_through_the_reference_second_backward():
    ops = draw(2, 4, 1, 2, 2, 5, seed=5)
    args = [ops.cotangent, ops.left, ops.right, ops.grad_grad_left, ops.grad_grad_right]
    args = [a.clone().requires_grad_() for a in args]

    def bwd2(*xs):
        return torch.ops.gridpair.grid_pair_bwd2(*xs, ops.to_grid, ops.from_grid, 2)

    assert torch.autograd.gradcheck(bwd2, args)


def _op_args(op, ops):
    proj = (ops.to_grid, ops.from_grid, ops.n_frames)
    if op == "grid_pair_fwd":
        return (ops.left, ops.right, *proj)
    if op == "grid_pair_bwd":
        return (ops.cotangent, ops.left, ops.right, *proj)
    return (ops.cotangent, ops.left, ops.right, ops.grad_grad_left, ops.grad_grad_right, *proj)


def _second_order(fn, ops, weight_needs_grad):
    """Gradients of a force loss whose energy weights need a gradient or not."""
    left = ops.left.detach().requires_grad_()
    right = ops.right.detach().requires_grad_()
    weight = ops.cotangent.detach().requires_grad_(weight_needs_grad)
    out = fn(left, right, ops.to_grid, ops.from_grid, ops.n_frames)
    grad_left, grad_right = torch.autograd.grad((out * weight).sum(), (left, right),
                                                create_graph=True)
    loss = (grad_left * ops.grad_grad_left).sum() + (grad_right * ops.grad_grad_right).sum()
    return torch.autograd.grad(loss, (left, right), create_graph=True)


@pytest.mark.parametrize("weight_needs_grad", [False, True])
def test_second_backward_runs_bwd2_only_when_the_cotangent_needs_a_gradient(
        weight_needs_grad, monkeypatch):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")  # the selector is asked (float64: fallback)
    ops = draw(3, 9, 2, 3, 4, 23, seed=21)
    asked = []
    unsubscribe = gridpair.SELECTOR.subscribe(lambda event: asked.append(event.op))
    try:
        got = _second_order(grid_pair, ops, weight_needs_grad)
    finally:
        unsubscribe()
    want = _second_order(reference_grid_pair, ops, weight_needs_grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    assert set(asked) == ({"fwd", "bwd", "bwd2"} if weight_needs_grad else {"fwd", "bwd"})
    # The pruned path stays differentiable: third order through bwd's own backward.
    small = draw(2, 4, 1, 2, 3, 6, seed=5)

    def second_order_of(left, right):
        return _second_order(grid_pair, dataclasses.replace(small, left=left, right=right),
                             weight_needs_grad)

    assert torch.autograd.gradcheck(second_order_of, (small.left.requires_grad_(),
                                                      small.right.requires_grad_()))


# One dtype: float32 and float64 take the same path through the ops (checks, selector, reference
# composition, fake results in the operands' dtype); the mixed-precision form below is the other.
@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_opcheck(op):
    ops = draw(2, 9, 2, 3, 2, 11, seed=6, layout="degree_major").to(torch.float32)
    # Coefficient operands are differentiated; projectors are constants.
    args = tuple(a.requires_grad_() if isinstance(a, torch.Tensor) and a.dim() == 4 else a
                 for a in _op_args(op, ops))
    torch.library.opcheck(getattr(torch.ops.gridpair, op).default, args)


def _mixed_args(op, ops):
    """The op's mixed-precision form as autocast calls it: bfloat16 projectors and cotangent,
    float32 coefficients and grad-grads, compute_dtype bfloat16."""
    args = list(_op_args(op, ops.to(torch.float32)))
    n = len(args) - 3
    args[n:n + 2] = [p.to(torch.bfloat16) for p in args[n:n + 2]]
    if op != "grid_pair_fwd":
        args[0] = args[0].to(torch.bfloat16)
    return [*args, torch.bfloat16]


# The dtype of each result of the mixed form: the forward's output in the compute dtype, each
# gradient in the dtype of the operand it is the gradient of.
MIXED_RESULT_DTYPES = {
    "grid_pair_fwd": [torch.bfloat16],
    "grid_pair_bwd": [torch.float32, torch.float32],
    "grid_pair_bwd2": [torch.bfloat16, torch.float32, torch.float32],
}


@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_opcheck_of_the_mixed_precision_form(op):
    ops = draw(2, 9, 2, 3, 2, 11, seed=6, layout="degree_major")
    args = tuple(a.requires_grad_() if isinstance(a, torch.Tensor) and a.dim() == 4 else a
                 for a in _mixed_args(op, ops))
    torch.library.opcheck(getattr(torch.ops.gridpair, op).default, args)


@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_mixed_precision_form_rounds_operands_to_the_compute_dtype(op):
    ops = draw(2, 9, 2, 3, 2, 11, seed=12)
    args = _mixed_args(op, ops)
    got = getattr(torch.ops.gridpair, op)(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = _reference_op(op, [a.to(torch.bfloat16) if isinstance(a, torch.Tensor) else a
                              for a in args[:-1]])
    for g, w, dtype in zip(got, want, MIXED_RESULT_DTYPES[op], strict=True):
        assert g.dtype == dtype
        torch.testing.assert_close(g, w.to(dtype), rtol=0, atol=0)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        result = getattr(torch.ops.gridpair, op)(*fake)
    results = result if isinstance(result, tuple) else (result,)
    assert [r.dtype for r in results] == MIXED_RESULT_DTYPES[op]


@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_fake_tensors_give_shapes_and_dtypes(op):
    ops = draw(3, 9, 2, 3, 4, 23, seed=7, layout="degree_major").to(torch.float32)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
                for a in _op_args(op, ops)]
        result = getattr(torch.ops.gridpair, op)(*fake)
    results = result if isinstance(result, tuple) else (result,)
    assert len(results) == {"grid_pair_fwd": 1, "grid_pair_bwd": 2, "grid_pair_bwd2": 3}[op]
    for r in results:
        assert r.shape == ops.left.shape and r.dtype == torch.float32 and r.is_contiguous()


def test_empty_batch():
    ops = draw(0, 9, 2, 3, 4, 23, seed=8).to(torch.float32)
    out = grid_pair(ops.left, ops.right, ops.to_grid, ops.from_grid, 3)
    assert out.shape == (0, 9, 2, 12)


OP_RESULTS = {"grid_pair_fwd": 1, "grid_pair_bwd": 2, "grid_pair_bwd2": 3}


def _reference_op(op, args):
    """The op's result computed by the reference composition (independent of the op)."""
    from gridpair import reference

    result = getattr(reference, op.removeprefix("grid_pair_"))(*args)
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_autocast_runs_each_op_in_the_autocast_dtype(op):
    ops = draw(2, 9, 2, 3, 2, 11, seed=9).to(torch.float32)
    args = _op_args(op, ops)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = getattr(torch.ops.gridpair, op)(*args)
    got = got if isinstance(got, tuple) else (got,)
    # What the op must have computed: the reference on the operands cast to bfloat16. The
    # forward's output comes in bfloat16, as autocast's matmuls give; a gradient comes in the
    # dtype of its float32 operand, unrounded.
    cast = [a.to(torch.bfloat16) if isinstance(a, torch.Tensor) else a for a in args]
    want = _reference_op(op, cast)
    dtypes = {"grid_pair_fwd": [torch.bfloat16], "grid_pair_bwd": [torch.float32] * 2,
              "grid_pair_bwd2": [torch.float32] * 3}[op]
    assert len(got) == OP_RESULTS[op]
    for g, w, dtype in zip(got, want, dtypes, strict=True):
        assert g.dtype == dtype
        torch.testing.assert_close(g, w.to(dtype), rtol=0, atol=0)


@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_autocast_casts_operands_of_other_dtypes(op):
    """Only float32 operands are left for the kernels to round: float16 ones are cast to the
    autocast dtype, as torch casts a matmul's, and every result comes in it."""
    ops = draw(2, 9, 2, 3, 2, 11, seed=9).to(torch.float32)
    args = [a.half() if isinstance(a, torch.Tensor) else a for a in _op_args(op, ops)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = getattr(torch.ops.gridpair, op)(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = _reference_op(op, [a.to(torch.bfloat16) if isinstance(a, torch.Tensor) else a
                              for a in args])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.bfloat16
        torch.testing.assert_close(g, w, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_autocast_leaves_float64_alone_as_torch_does(op):
    ops = draw(2, 9, 2, 3, 2, 11, seed=10)
    args = _op_args(op, ops)
    # torch's own rule, seen on an aten op: autocast never casts float64.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.mm(ops.to_grid, ops.to_grid.T).dtype == torch.float64
        got = getattr(torch.ops.gridpair, op)(*args)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, _reference_op(op, args), strict=True):
        assert g.dtype == torch.float64
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_grid_pair_under_autocast_matches_the_float64_reference_in_float64():
    ops = draw(3, 9, 2, 3, 4, 23, seed=12)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = grid_pair(ops.left, ops.right, ops.to_grid, ops.from_grid, ops.n_frames)
    want = reference_grid_pair(ops.left, ops.right, ops.to_grid, ops.from_grid, ops.n_frames)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)


class _RecordingSelector(LaunchSelector):
    """Records which ops asked it for a tile; computes nothing itself (reference path)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def choose(self, op, operands, projectors, n_frames):
        self.asked.append(op)
        return None


def test_a_backward_in_another_thread_uses_the_forwards_selector():
    # On CUDA, autograd runs backward in its device thread, which does not see the forward
    # thread's using_selector context; here a thread of our own plays that part.
    import threading

    ops = draw(3, 9, 2, 3, 4, 23, seed=5)
    left, right = (x.detach().requires_grad_() for x in (ops.left, ops.right))
    weight = torch.randn(left.shape, dtype=torch.float64, requires_grad=True)
    recording = _RecordingSelector()
    with using_selector(recording):
        out = grid_pair(left, right, ops.to_grid, ops.from_grid, ops.n_frames)
    assert recording.asked == ["fwd"]

    def second_order() -> None:
        grads = torch.autograd.grad((out * weight).sum(), (left, right), create_graph=True)
        sum(g.sum() for g in grads).backward()

    worker = threading.Thread(target=second_order)
    worker.start()
    worker.join()
    assert recording.asked == ["fwd", "bwd", "bwd2"]
