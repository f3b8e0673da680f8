"""grid_pair's eager path (gridpair.eager) end to end under Triton's interpreter: the kernels run
on CPU tensors through plain autograd.Functions, to second order, against float64; the selector
is asked before a layout's first launch and again whenever that answer may have changed (a
prepared launch is reused only while it stands), and anything traced still sees the custom ops.

The selectors here admit one small tile without compiling (validation is covered elsewhere);
GRIDPAIR_DEVICE gives CPU operands a device to validate for.
"""

import dataclasses

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from gridpair import grid_pair, reference, reference_grid_pair
from gridpair.active import using_selector
from gridpair.geometry import Tile
from gridpair.selector import LaunchSelector
from gridpair.tracing import nothing_traces
from gridpair.validation import Compiled
from numerics import assert_within_reference_error, draw, force_quantities, reference_quantities

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


class AdmitsSmall(LaunchSelector):
    """Admits SMALL for every key with LaunchSelector's own choose, key and choose_keyed (so
    the eager path keeps its prepared launches), without compiling; records what it validates
    and (through a spy on the instance) the key of every choose_keyed it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.validated: list = []
        self.asked: list = []
        choose_keyed = self.choose_keyed

        def asked(op, operands, projectors, n_frames):
            chosen = choose_keyed(op, operands, projectors, n_frames)
            self.asked.append(chosen[0])
            return chosen

        self.choose_keyed = asked

    def candidates(self, key, device_name):
        return [SMALL]

    def validate(self, key, tile, limits):
        self.validated.append(key)
        return Compiled(0, None)


@pytest.fixture
def own_keys(monkeypatch):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")
    with using_selector(AdmitsSmall()) as chosen:
        yield chosen


def forward(left, right, ops):
    return grid_pair(left, right, ops.to_grid, ops.from_grid, ops.n_frames)


def assert_forward_right(out, left, right, ops):
    exact = reference.fwd(left.double(), right.double(), ops.to_grid.double(),
                          ops.from_grid.double(), ops.n_frames)
    assert (out.double() - exact).norm() <= 1e-5 * exact.norm()


def test_a_repeat_launch_on_the_same_layout_reuses_its_prepared_launch(own_keys):
    ops = draw(3, 9, 2, 3, 5, 23, seed=38).to(torch.float32)
    first = forward(ops.left, ops.right, ops)
    assert len(own_keys.asked) == 1 and len(own_keys.validated) == 1
    # New tensors, new values, the same layout: nothing asked, the same kernel's result.
    left, right = ops.left.clone() * 2, ops.right.clone()
    again = forward(left, right, ops)
    assert len(own_keys.asked) == 1
    assert_forward_right(first, ops.left, ops.right, ops)
    assert_forward_right(again, left, right, ops)
    # Twice the left operand, twice the result (exactly, on the BLAS at hand; any BLAS within
    # rounding): the same launch ran on the new operands, not a stale result.
    torch.testing.assert_close(again, 2 * first, rtol=1e-6, atol=0)


def test_each_layout_the_key_reads_is_asked_and_launched_for_itself(own_keys):
    """Strides, alignment, dtype, node count and frames each ask the selector again (some
    make another key, all another launch): a launch prepared for one layout must not run on
    another (it would read the operands with the wrong strides or sizes, or with a kernel
    specialized for another alignment)."""
    ops = draw(3, 9, 2, 3, 5, 23, seed=39).to(torch.float32)
    forward(ops.left, ops.right, ops)

    def unaligned(x):  # the same values 4 bytes past a 16-byte boundary
        storage = torch.empty(x.numel() + 1, dtype=x.dtype)[1:]
        return storage.view(x.shape).copy_(x)

    strided = draw(3, 9, 2, 3, 5, 23, seed=39, layout="degree_major_aligned").to(torch.float32)
    variants = [
        ("strides", strided.left, strided.right, strided),
        ("alignment", unaligned(ops.left), ops.right, ops),
        ("dtype", ops.left.half(), ops.right.half(), ops.to(torch.float16)),
        ("nodes", ops.left[:2], ops.right[:2], ops),
    ]
    six = draw(3, 9, 2, 6, 5, 23, seed=39).to(torch.float32)
    six = dataclasses.replace(six, left=six.left.reshape(3, 9, 2, 6 * 5),
                              right=six.right.reshape(3, 9, 2, 6 * 5))
    variants.append(("frames", six.left, six.right, six))
    for name, left, right, variant in variants:
        for _ in range(2):  # the base layout prepared under the selector's latest revision
            forward(ops.left, ops.right, ops)
        asked = len(own_keys.asked)
        forward(ops.left, ops.right, ops)
        assert len(own_keys.asked) == asked, name
        out = forward(left, right, variant)
        assert len(own_keys.asked) == asked + 1, name
        exact = reference.fwd(left.double(), right.double(), variant.to_grid.double(),
                              variant.from_grid.double(), variant.n_frames)
        tolerance = 2e-3 if left.dtype == torch.float16 else 1e-5
        assert (out.double() - exact).norm() <= tolerance * exact.norm(), name
    assert (False, True) in [key.signature.aligned for key in own_keys.asked]


def test_each_operand_dtype_is_part_of_the_layout(own_keys):
    """Under autocast float32 operands meet float16 projectors: not the launch prepared for
    float16 operands, whose kernel would read float32 bytes as float16."""
    ops = draw(3, 9, 2, 3, 5, 23, seed=44).to(torch.float32)
    half = ops.to(torch.float16)
    for _ in range(2):
        forward(half.left, half.right, half)
    asked = len(own_keys.asked)
    with torch.autocast("cpu", dtype=torch.float16):
        out = forward(ops.left, ops.right, ops)  # float32 projectors, cast by autocast
    assert len(own_keys.asked) == asked + 1
    assert own_keys.asked[-1].signature.operand_dtypes == (torch.float32, torch.float32)
    exact = reference.fwd(ops.left.double(), ops.right.double(), half.to_grid.double(),
                          half.from_grid.double(), ops.n_frames)
    assert (out.double() - exact).norm() <= 2e-3 * exact.norm()


def test_a_reset_selector_is_asked_and_validates_again(own_keys):
    ops = draw(3, 9, 2, 3, 5, 23, seed=40).to(torch.float32)
    forward(ops.left, ops.right, ops)
    own_keys.reset()
    forward(ops.left, ops.right, ops)
    assert len(own_keys.asked) == 2 and len(own_keys.validated) == 2


def test_a_new_shared_memory_cap_is_another_key(own_keys, monkeypatch):
    from gridpair.harness import SMEM_LIMIT_ENV

    ops = draw(3, 9, 2, 3, 5, 23, seed=41).to(torch.float32)
    forward(ops.left, ops.right, ops)
    monkeypatch.setenv(SMEM_LIMIT_ENV, "101376")
    forward(ops.left, ops.right, ops)
    assert [key.limit for key in own_keys.asked][1] == 101376
    assert own_keys.asked[0].limit > 101376


def test_another_selector_makes_its_own_choice(own_keys):
    ops = draw(3, 9, 2, 3, 5, 23, seed=42).to(torch.float32)
    forward(ops.left, ops.right, ops)
    with using_selector(AdmitsSmall()) as other:
        forward(ops.left[:2], ops.right[:2], ops)  # the same revision as own_keys now
        assert other.revision == own_keys.revision
        forward(ops.left, ops.right, ops)
    assert len(other.asked) == 2


def test_a_selector_that_chooses_its_own_way_is_asked_every_time(monkeypatch):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")

    class Counting(AdmitsSmall):
        def choose_keyed(self, op, operands, projectors, n_frames):
            self.overridden = getattr(self, "overridden", 0) + 1
            return super().choose_keyed(op, operands, projectors, n_frames)

    ops = draw(3, 9, 2, 3, 5, 23, seed=45).to(torch.float32)
    with using_selector(Counting()) as counting:
        for _ in range(3):
            forward(ops.left, ops.right, ops)
    assert counting.overridden == 3


def test_listeners_hear_of_every_launch_prepared_or_not(own_keys):
    ops = draw(3, 9, 2, 3, 5, 23, seed=43).to(torch.float32)
    forward(ops.left, ops.right, ops)
    events = []
    unsubscribe = own_keys.subscribe(events.append)
    try:
        for _ in range(3):
            forward(ops.left, ops.right, ops)
    finally:
        unsubscribe()
    assert [(event.kind, event.op, event.outcome) for event in events] == [
        ("admit", "fwd", "cached")] * 3
