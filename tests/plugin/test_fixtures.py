"""compile_counter and cold_state (launch_events is in test_selectors.py)."""

from __future__ import annotations

import pytest
from coldhelp import needs_fork, run, run_inprocess


def test_compile_counter_counts_and_fails_with_the_recompile_reasons(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import torch

        # A view: Inductor compiles each graph (compile_counter counts it) without a C++
        # kernel to build, which the counts and reasons are not about.
        def flattened(x):
            return x.view(-1)

        def test_counter(compile_counter):
            compiled = torch.compile(flattened, backend=compile_counter, dynamic=False)
            with torch.no_grad():
                compiled(torch.ones(4))
                compiled(torch.ones(4))  # cached: no new frame
                compiled(torch.ones(5))  # a new shape: Dynamo recompiles
            compile_counter.assert_graphs(frames=2, forward=2, backward=0)
            assert len(compile_counter.recompile_reasons) == 1
            compile_counter.assert_graphs(frames=1, backward=0)
        """
    )
    result = run(cold)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E*AssertionError: compile_counter: frames: expected 1, got 2",
            "E*recompile reasons:",
            "E*  - flattened: *size mismatch at index 0. expected 4, actual 5",
        ]
    )
    result.stdout.no_fnmatch_line("*backward: expected*")  # only the counts that differ


def test_cold_state_in_process(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        def test_state(cold_state):
            assert cold_state.cold is False
            assert cold_state.mode is None and cold_state.cache_dir is None
            assert cold_state.smem_limit is None
        """
    )
    run_inprocess(cold).assert_outcomes(passed=1)


@needs_fork
def test_cold_state_in_a_cold_child(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import os, pytest

        @pytest.mark.cold_compile
        @pytest.mark.smem_limit(49152)
        def test_state(cold_state):
            assert cold_state.cold is True and cold_state.mode == "fork"
            # There, private and empty when the test starts (a user may list it).
            assert os.listdir(cold_state.cache_dir) == []
            assert cold_state.smem_limit == 49152
        """
    )
    run(cold).assert_outcomes(passed=1)


def test_assert_graphs_raises_assertion_error_with_the_counts_and_reasons() -> None:
    from pytest_coldcompile.fixtures import CompileCounter

    counter = CompileCounter()
    counter.frames, counter.forward_graphs = 2, 1
    counter.assert_graphs(frames=2, forward=1)  # matching counts pass silently
    # pytest.raises(AssertionError): pytest.fail's exception is not one and would escape.
    with pytest.raises(AssertionError) as info:
        counter.assert_graphs(frames=1, forward=1, backward=0)
    assert type(info.value) is AssertionError
    text = str(info.value)
    assert text.startswith("compile_counter: frames: expected 1, got 2\nrecompile reasons:")
    assert "backward: expected" not in text and "forward: expected" not in text
