"""grid_pair's eager path (gridpair.eager) end to end under Triton's interpreter: the kernels run
on CPU tensors through plain autograd.Functions, to second order, against float64; the selector
is asked before every launch, and anything traced still sees the custom ops.

The selector here admits one small tile without compiling (validation is covered elsewhere);
GRIDPAIR_DEVICE gives CPU operands a device to validate for.
"""

import os

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from gridpair import grid_pair, reference, reference_grid_pair
from gridpair.geometry import Tile
from gridpair.launch import nothing_traces
from gridpair.probe import Compiled
from gridpair.selector import LaunchSelector, using_selector
from numerics import assert_within_reference_error, draw, force_quantities, reference_quantities

assert os.environ.get("TRITON_INTERPRET") == "1", "run through test_interpreter.py"

SMALL = Tile(16, 16, 1, 4)


class OneTileSelector(LaunchSelector):
    """Admits SMALL for every key without compiling; records what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def candidates(self, key, device_name):
        return [SMALL]

    def validate(self, key, tile, limits):
        return Compiled(0, None)

    def choose(self, op, operands, projectors, n_frames):
        self.asked.append(op)
        return super().choose(op, operands, projectors, n_frames)


@pytest.fixture
def selector(monkeypatch):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")
    with using_selector(OneTileSelector()) as chosen:
        yield chosen


@pytest.fixture
def launches(monkeypatch):
    """Kernel launches of the eager path, by kernel name."""
    from gridpair import launch as launch_module

    seen = []
    real = launch_module.launch

    def spy(op, *args, **kwargs):
        seen.append((op, kwargs.get("direct", False)))
        return real(op, *args, **kwargs)

    monkeypatch.setattr("gridpair.eager.launch", spy)
    return seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("layout", ["contiguous", "degree_major"])
def test_force_step_through_the_eager_kernels_within_reference_error(selector, launches,
                                                                     dtype, layout):
    ops = draw(3, 9, 2, 3, 5, 23, seed=31, layout=layout)
    own, exact = reference_quantities(ops, dtype)
    got = force_quantities(grid_pair, ops.to(dtype))
    assert_within_reference_error(got, own, exact, dtype=dtype)
    # fwd, then bwd, then (the cotangent needs a gradient here) bwd2: each a direct kernel
    # launch, each asked of the selector first.
    assert launches == [("fwd", True), ("bwd", True), ("bwd2", True)]
    assert selector.asked == ["fwd", "bwd", "bwd2"]


def test_constant_cotangent_takes_the_first_backward_kernel_twice(selector, launches):
    ops = draw(3, 9, 2, 3, 5, 23, seed=32)
    left = ops.left.float().requires_grad_()
    right = ops.right.float().requires_grad_()
    out = grid_pair(left, right, ops.to_grid.float(), ops.from_grid.float(), ops.n_frames)
    energy = (out * ops.cotangent.float()).sum()
    grads = torch.autograd.grad(energy, (left, right), create_graph=True)
    loss = sum((g * h.float()).sum() for g, h in zip(grads, (ops.grad_grad_left,
                                                              ops.grad_grad_right)))
    second = torch.autograd.grad(loss, (left, right))
    assert [op for op, _ in launches] == ["fwd", "bwd", "bwd"]

    exact_left, exact_right = ops.left.requires_grad_(), ops.right.requires_grad_()
    exact_out = reference_grid_pair(exact_left, exact_right, ops.to_grid, ops.from_grid,
                                    ops.n_frames)
    exact_grads = torch.autograd.grad((exact_out * ops.cotangent).sum(),
                                      (exact_left, exact_right), create_graph=True)
    exact_loss = sum((g * h).sum() for g, h in zip(exact_grads, (ops.grad_grad_left,
                                                                ops.grad_grad_right)))
    exact_second = torch.autograd.grad(exact_loss, (exact_left, exact_right))
    for got, exact in zip(second, exact_second):
        assert (got.double() - exact).norm() <= 1e-4 * exact.norm()


def test_third_order_differentiates_the_reference(selector):
    ops = draw(2, 4, 1, 1, 3, 5, seed=33)
    left = ops.left.clone().requires_grad_()
    right = ops.right.clone().requires_grad_()

    def third(fn):
        out = fn(left, right, ops.to_grid, ops.from_grid, ops.n_frames)
        # A cotangent that depends on the operands: the second backward's own backward runs.
        g_left, = torch.autograd.grad(out.pow(2).sum(), left, create_graph=True)
        h_left, = torch.autograd.grad(g_left.pow(2).sum(), right, create_graph=True)
        return torch.autograd.grad(h_left.sum(), left)[0]

    # float64 has no fused kernel: same selector, reference path; float32 runs the kernels.
    exact = third(reference_grid_pair)
    got = third(lambda *a: grid_pair(*(x.float() if torch.is_tensor(x) else x for x in a)))
    assert (got.double() - exact).norm() <= 1e-4 * exact.norm()


def test_nothing_fits_computes_the_reference(monkeypatch, launches):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")

    class NothingFits(OneTileSelector):
        def validate(self, key, tile, limits):
            from triton.runtime.errors import OutOfResources
            raise OutOfResources(10**6, 1, "shared memory")

    ops = draw(3, 9, 2, 3, 5, 23, seed=34).to(torch.float32)
    with using_selector(NothingFits()):
        out = grid_pair(ops.left, ops.right, ops.to_grid, ops.from_grid, ops.n_frames)
    assert launches == []
    assert torch.equal(out, reference.fwd(ops.left, ops.right, ops.to_grid, ops.from_grid,
                                          ops.n_frames))


def test_traced_calls_see_the_custom_ops(selector, launches):
    ops = draw(3, 9, 2, 3, 5, 23, seed=35).to(torch.float32)
    args = (ops.left, ops.right, ops.to_grid, ops.from_grid)
    assert nothing_traces(args)
    graph = make_fx(lambda *a: grid_pair(*a, ops.n_frames))(*args)
    targets = {str(node.target) for node in graph.graph.nodes}
    assert "gridpair.grid_pair_fwd.default" in targets, targets
    assert launches == []  # the trace went through the op, never the eager launch
    with torch._subclasses.FakeTensorMode() as mode:
        fake = [mode.from_tensor(x) for x in args]
        assert not nothing_traces(fake)
    assert not nothing_traces([torch.zeros(2, 2, device="meta")])
    in_vmap = []
    torch.vmap(lambda x: in_vmap.append(nothing_traces([x, *args[1:]])) or x)(
        ops.left.unsqueeze(0))
    assert in_vmap == [False]


def test_autocast_runs_the_kernels_in_the_autocast_dtype(selector, monkeypatch):
    """Eagerly under autocast the kernels get the float32 coefficients themselves (rounded to
    the autocast dtype as they are loaded: no cast kernels, no rounded copies) and return each
    gradient in float32, unrounded."""
    from gridpair import eager

    real, operand_dtypes = eager.launch, []

    def spy(op, operands, to_grid, *args, **kwargs):
        operand_dtypes.append((op, [x.dtype for x in operands], to_grid.dtype))
        return real(op, operands, to_grid, *args, **kwargs)

    monkeypatch.setattr(eager, "launch", spy)
    ops = draw(3, 9, 2, 3, 5, 23, seed=36)
    own, exact = reference_quantities(ops, torch.float16)
    single = ops.to(torch.float32)
    with torch.autocast("cpu", dtype=torch.float16):
        got = force_quantities(grid_pair, single)
    half, f32 = torch.float16, torch.float32
    assert got["out"].dtype == half
    assert all(got[name].dtype == f32 for name in ("grad_left", "grad2_left", "grad2_right"))
    assert operand_dtypes == [("fwd", [f32, f32], half), ("bwd", [half, f32, f32], half),
                              ("bwd2", [half, f32, f32, f32, f32], half)]
    assert_within_reference_error(got, own, exact, dtype=torch.float16)


def test_strided_projectors_are_padded_once_and_computed_right(selector, launches,
                                                                monkeypatch):
    import dataclasses

    from gridpair import launch as launch_module

    ops = draw(3, 9, 2, 3, 5, 23, seed=37).to(torch.float32)
    # Transposed storage: (G, D*K) views with strides (1, G).
    to_grid = ops.to_grid.t().contiguous().t()
    from_grid = ops.from_grid.t().contiguous().t()
    assert not to_grid.is_contiguous()
    strided = dataclasses.replace(ops, to_grid=to_grid, from_grid=from_grid)
    own, exact = reference_quantities(draw(3, 9, 2, 3, 5, 23, seed=37), torch.float32)
    assert_within_reference_error(force_quantities(grid_pair, strided), own, exact)
    padded = []
    real_pad = launch_module.pad_projector
    monkeypatch.setattr(launch_module, "pad_projector",
                        lambda projector: padded.append(projector) or real_pad(projector))
    force_quantities(grid_pair, strided)  # a second step: the caller's projectors are the keys
    assert len(launches) == 6 and padded == []
