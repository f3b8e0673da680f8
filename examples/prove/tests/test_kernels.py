import pytest
from toykernels import kernel_sum, toy_compile
from toykernels.launch import SELECTOR, load, tracing
from toykernels.testing import eager_warm_up, trusting_selector


@pytest.mark.cold_compile
@pytest.mark.guards(trusting_selector, raises="toykernels.launch.OutOfResources",
                    match="out of resource: shared memory", masked_by=eager_warm_up)
def test_compiled_sum_runs_cold():
    assert toy_compile(kernel_sum)([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards("toykernels.testing:trusting_selector", raises="toykernels.OutOfResources")
def test_a_tile_chosen_while_tracing_loads():
    with tracing():
        tile = SELECTOR.choose([0.0] * 8)
    load(tile)  # the device accepts it
