import pytest
import toykernels

VALUES = [float(i) for i in range(1000)]


@pytest.mark.smem_limit(101376)
def test_eager_call_on_a_small_gpu():
    # In-process: it warms the selector's cache, which would hide the bug from a warm test.
    assert toykernels.blocked_sum(VALUES) == sum(VALUES)


@pytest.mark.cold_compile               # a fresh child: nothing chosen, nothing cached
@pytest.mark.smem_limit(101376)         # behave like a GPU with 99 KiB per block
def test_compiled_call_fits_a_small_gpu(launch_events, cold_state):
    step = toykernels.compile(toykernels.blocked_sum)
    assert step(VALUES) == sum(VALUES)
    assert launch_events.ops("admitted") == {"blocked_sum"}
    assert max(e.resources["shared"] for e in launch_events.admitted) <= cold_state.smem_limit
    for event in launch_events.probed + launch_events.admitted:
        print(event.kind, event.op, dict(event.config), dict(event.resources), event.outcome)
