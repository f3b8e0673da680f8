"""The proof that the cold regressions catch the bug they guard (GPU only), on the plugin's
prove mode (docs/prove.md): ``pytest --cold-compile-prove tests/regressions/test_proof.py``.

The bug is trusting.TrustingSelector: launch selection that trusts a successful trace, as the
old retry loop did. On a device emulating 101376 bytes of shared memory per block:
(a) test_compiled_step_on_a_small_gpu[...-prove], cold with the bug brought back: the compiled
    step fails with Triton's OutOfResources for the emulated limit, which reaches the test as
    Inductor's InductorError quoting it (verdict caught);
(b) its warm leg (fp32): an eager step first, with the same bug, teaches the trusting selector
    a tile that fits, and the compiled step passes (masked): the masking that
    pytest-coldcompile exists to defeat;
(c) the test itself, with the validated selector, passes cold under the same limit; that every
    admitted launch fits it is test_cold_force_loss.py run with --smem-limit 101376.
Without --cold-compile-prove, (c) alone runs.
"""

import contextlib

import pytest
import torch
from force_step import Case, compile_step, make_step, operands
from trusting import TrustingSelector

from gridpair.active import using_selector

LIMIT = 101376
# Inductor's autotuner re-raises a load's OutOfResources as a RuntimeError carrying its text but
# not the exception (no __cause__), wrapped in an InductorError: the error is Triton's when either
# exception carries Triton's message for the emulated limit.
RAISES = ("triton.runtime.errors.OutOfResources", "torch._inductor.exc.InductorError")
MATCH = rf"out of resource: shared memory, Required: \d+, Hardware limit: {LIMIT}"


@contextlib.contextmanager
def trusting_selector():
    """The bug: the custom ops choose launches through a selector that trusts the trace."""
    trusting = TrustingSelector()
    admitted = []
    unsubscribe = trusting.subscribe(lambda e: admitted.append(e) if e.kind == "admit" else None)
    try:
        with using_selector(trusting):
            yield trusting
    except Exception:
        if not admitted:  # then the failure is not the trusting selector's
            raise AssertionError("the trusting selector admitted nothing") from None
        raise
    finally:
        unsubscribe()


def contiguous_operands(case, nodes, seed):
    # Contiguous operands: eager and traced launches then share one selector key (a traced
    # view's storage offset is symbolic, which the selector keys as possibly unaligned).
    return [x.contiguous() for x in operands(case, nodes, seed)]


def eager_step_first(precision):
    """The warm-up of (b): one eager step, whose retry loop learns a tile that fits."""
    case = Case("multi-focus", precision, "cuda")
    with case.autocast():
        make_step(case.shape[2])(*contiguous_operands(case, 128, seed=0))
    torch.cuda.synchronize()


GUARDS = {"raises": RAISES, "match": MATCH}


@pytest.mark.cold_compile
@pytest.mark.requires_cuda
@pytest.mark.smem_limit(LIMIT)
@pytest.mark.parametrize("precision", [
    pytest.param("float32", marks=pytest.mark.guards(trusting_selector, **GUARDS,
                                                     masked_by=eager_step_first)),
    pytest.param("bf16-amp", marks=pytest.mark.guards(trusting_selector, **GUARDS)),
])
def test_compiled_step_on_a_small_gpu(precision, compile_counter):
    case = Case("multi-focus", precision, "cuda")
    example = contiguous_operands(case, 300, seed=1)
    compiled, _ = compile_step(case, compile_counter, example)  # traced: nothing loaded yet
    compiled(*example)  # Inductor compiles and loads the recorded kernels here
    torch.cuda.synchronize()
    compile_counter.assert_graphs(frames=1)
