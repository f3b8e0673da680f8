"""Cold compiled force-loss regressions of gridpair, the product's reason to exist.

Each test runs in a child that compiled nothing before (cold_compile), compiles the force-loss
step once, runs it over changing node counts with batch-dependent strides, compares energy and
second-order gradients with a float64 evaluation of the reference composition, and asserts one
graph. What the compiled step launched is checked before any reference runs: a fused launch
admitted for every op of the production layouts, and the reference composition for every op
under a limit no tile fits.
"""

import dataclasses

import pytest
import torch
from force_step import LAYOUTS, OPS, Case, assert_matches_reference, compile_step, operands
from triton.runtime.errors import OutOfResources

from gridpair import devices
from gridpair.geometry import Geometry, Tile
from gridpair.launch import pad_projector
from gridpair.signature import contiguous_signature
from gridpair.validation import compile_candidate

pytestmark = pytest.mark.cold_compile


def smallest_tile_shared(case: Case, example, op: str) -> int:
    """Shared memory of the smallest tile the kernels take (16 x 16 blocks, one stage, four
    warps) for ``op``, compiled straight through Triton for the device with no limit of ours
    applied: no selector decision involved. On a capped GPU Triton itself refuses it, saying
    how much it needs."""
    left, _, to_grid, _ = example[:4]
    dtype = torch.bfloat16 if case.precision == "bf16-amp" else torch.float32
    limits = dataclasses.replace(devices.limits_for(left.device), shared=2**31)
    geometry = Geometry.of(left, to_grid, case.shape[2])
    signature = contiguous_signature(op, geometry, dtype, left.shape[0])
    try:
        return compile_candidate(op, geometry, Tile(16, 16, 1, 4), signature, limits).shared
    except OutOfResources as refused:
        return refused.required


def run_regression(case: Case, compile_counter, launch_events, fused: bool):
    """The compiled step cold; ``fused``: every op admitted a fused launch (else every op
    fell back), stated by the test, not asked of the selector under test."""
    example = operands(case, case.node_counts()[0], seed=0)
    with launch_events.window() as compiled_launches:  # nothing eager has run yet
        compiled, _ = compile_step(case, compile_counter, example)
        first = compiled(*example)
    admitted = compiled_launches.ops("admitted")
    fell_back = compiled_launches.ops("fallback")
    assert admitted == (OPS if fused else set()), compiled_launches.admitted
    assert fell_back == (set() if fused else OPS), compiled_launches.fallback
    limit = devices.limits_for(example[0].device).shared
    for event in compiled_launches.admitted:
        assert event.resources["shared"] <= limit, event

    results = [(example, first)]
    for index, nodes in enumerate(case.node_counts()[1:], start=1):
        inputs = operands(case, nodes, seed=index)
        results.append((inputs, compiled(*inputs)))
    compile_counter.assert_graphs(frames=1)

    for inputs, got in results:  # references only now
        assert_matches_reference(case, got, inputs)


@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_compiled_force_loss_step_cold(layout, precision, device, compile_counter,
                                       launch_events):
    # The production layouts fit every profile we ship, fused, in both precisions.
    run_regression(Case(layout, precision, device), compile_counter, launch_events, fused=True)


@pytest.mark.smem_limit(4096)
@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
def test_forced_reference_fallback_cold(precision, device, compile_counter, launch_events,
                                        cold_state):
    """Under a 4 KiB per-block limit no tile fits: every op computes the reference
    composition inside its custom op, and the step still compiles once and matches float64.
    A small layout (64 slots, two focus): the ladder is probed to its end either way."""
    assert cold_state.smem_limit == 4096
    case = Case("small", precision, device)
    # Independent of the selector: even the smallest tile needs more than the limit.
    example = operands(case, 6, seed=0)
    assert all(smallest_tile_shared(case, example, op) > 4096 for op in OPS)
    run_regression(case, compile_counter, launch_events, fused=False)
    assert launch_events.ops("fallback") == OPS


def test_padded_projector_is_aligned_and_zero_filled():
    # A strided, misaligned view: 147 columns of 151 from the fourth (12 bytes in).
    base = torch.randn(7, 151)
    projector = base[:, 3:150]
    assert projector.data_ptr() % 16 and not projector.is_contiguous()
    padded = pad_projector(projector)
    assert padded.shape == (7, 160) and padded.is_contiguous()  # 147 -> 128 + 32
    assert padded.data_ptr() % 16 == 0 and padded.untyped_storage().data_ptr() != (
        base.untyped_storage().data_ptr())
    assert torch.equal(padded[:, :147], base[:, 3:150]) and not padded[:, 147:].any()
