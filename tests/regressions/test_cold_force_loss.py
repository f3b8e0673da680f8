"""Cold compiled force-loss regressions of gridpair, the product's reason to exist.

Each test runs in a child that compiled nothing before (cold_compile), compiles the force-loss
step once, runs it over changing node counts with batch-dependent strides, compares energy and
second-order gradients with eager, and asserts one graph. What the compiled step launched is
checked before any eager reference runs: a fused launch admitted for every op the device can
fit, the reference composition for every op it cannot.
"""

import pytest
import torch
from force_step import LAYOUTS, OPS, Case, assert_matches_eager, compile_step, operands

from gridpair.launch import pad_projector
from gridpair.selector import LaunchSelector

pytestmark = pytest.mark.cold_compile


def fused_fits(case: Case, example) -> dict[str, bool]:
    """Whether validation finds a launch the device can load, per op, asked of a fresh
    selector (the compiled step's own decisions are what is under test)."""
    left, _, to_grid, from_grid = example[:4]
    dtype = torch.bfloat16 if case.precision == "bf16-amp" else torch.float32
    operands_of = {"fwd": 2, "bwd": 3, "bwd2": 5}
    coefficient = left.to(dtype)
    projectors = (to_grid.to(dtype).contiguous(), from_grid.to(dtype).contiguous())
    fresh = LaunchSelector()
    return {op: fresh.choose(op, [coefficient] * n, projectors, case.shape[2]) is not None
            for op, n in operands_of.items()}


def run_regression(case: Case, compile_counter, launch_events):
    example = operands(case, case.node_counts()[0], seed=0)
    with launch_events.window() as compiled_launches:  # nothing eager has run yet
        compiled, step = compile_step(case, compile_counter, example)
        first = compiled(*example)
    fits = fused_fits(case, example)
    admitted = compiled_launches.ops("admitted")
    fell_back = compiled_launches.ops("fallback")
    assert admitted == {op for op in OPS if fits[op]}, (fits, compiled_launches.admitted)
    assert fell_back == {op for op in OPS if not fits[op]}, (fits, compiled_launches.fallback)
    for event in compiled_launches.admitted:
        assert event.resources["shared"] <= event.resources["limit"], event

    results = [(example, first)]
    for index, nodes in enumerate(case.node_counts()[1:], start=1):
        inputs = operands(case, nodes, seed=index)
        results.append((inputs, compiled(*inputs)))
    compile_counter.assert_graphs(frames=1)

    for inputs, got in results:  # eager references only now
        with case.autocast():
            want = step(*inputs)
        assert_matches_eager(case, got, want)
    return fits


@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_compiled_force_loss_step_cold(layout, precision, device, compile_counter,
                                       launch_events):
    case = Case(layout, precision, device)
    fits = run_regression(case, compile_counter, launch_events)
    # The production layouts fit every profile we ship, fused, in both precisions.
    assert all(fits.values()), fits


@pytest.mark.smem_limit(8192)
@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
def test_forced_reference_fallback_cold(precision, device, compile_counter, launch_events,
                                        cold_state):
    """Under an 8 KiB per-block limit no tile fits: every op computes the reference
    composition inside its custom op, and the step still compiles once and matches eager."""
    assert cold_state.smem_limit == 8192
    fits = run_regression(Case("multi-focus", precision, device), compile_counter,
                          launch_events)
    assert not any(fits.values()), fits
    assert launch_events.ops("fallback") == OPS


def test_padded_projector_is_aligned_and_zero_filled():
    projector = torch.randn(7, 147)[:, :147]
    padded = pad_projector(projector)
    assert padded.shape == (7, 160)
    assert padded.data_ptr() % 16 == 0
    assert torch.equal(padded[:, :147], projector) and not padded[:, 147:].any()
